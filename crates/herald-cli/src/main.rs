//! The `herald` binary: command-line parsing, logging setup and wiring of the crates.

#[macro_use]
mod output;

mod acp_cmd;
mod chat_cmd;
mod chat_status;
mod config_check;
mod dashboard_cmd;
mod deliveries_cmd;
mod gateway_cmd;
mod gateway_status;
mod health_cmd;
mod hermes_import;
mod inbox_cmd;
mod logging;
mod mcp_cmd;
mod pairing_cmd;
mod plugins_cmd;
mod rpc_cmd;
mod schedule_cmd;
mod setup_cmd;
mod store_cmd;
mod stores;
mod webhook_cmd;
mod webhook_test;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use herald_config::Home;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc: the request path allocates many small JSON nodes; measured faster than the
/// system allocator under load (see docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What bare `herald` prints, and what `herald --help` opens with.
const OVERVIEW: &str = "\
herald turns events into agent work: it receives signed webhooks (GitHub, GitLab, Stripe,
Jira, Shopify, Slack, Discord, Twilio, ... and Standard Webhooks; `source:` on a route names
the sender, docs/senders.md), then delivers a message to a chat or runs an LLM agent on it.

Everyday commands:
  herald gateway run                 Start the gateway (writes config.yaml on the first start)
  herald gateway status              Is a gateway running on this home: ports, inbox counts
  herald webhook subscribe NAME ...  Add a route; `webhook list`, `webhook test NAME`
  herald inbox list                  Accepted events and what happened to each
  herald deliveries list             Direct deliveries and their outcome
  herald chat                        Talk to the agent (`-q TEXT` for one turn)
  herald config check                Report configuration mistakes (non-zero when any)";

#[derive(Parser, Debug)]
#[command(name = "herald", version, about = OVERVIEW, long_about = None)]
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
    command: Option<Command>,
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
    /// Manage webhook subscriptions (dynamic routes).
    Webhook {
        #[command(subcommand)]
        command: webhook_cmd::WebhookCommand,
    },
    /// Talk to the agent: `-q TEXT` for one turn, or a session on stdin.
    Chat(chat_cmd::ChatArgs),
    /// Serve the JSON-RPC gateway (sessions, turns, approvals, rewind) on stdio, or on
    /// WebSocket with --ws.
    Rpc(rpc_cmd::RpcArgs),
    /// Serve ACP (Agent Client Protocol) on stdio for IDEs such as Zed and VS Code;
    /// --check to verify the setup.
    Acp(acp_cmd::AcpArgs),
    /// The store as a whole (copying a home's SQLite stores into PostgreSQL).
    Store {
        #[command(subcommand)]
        command: store_cmd::StoreCommand,
    },
    /// Inspect deliveries (direct deliveries and their outcome).
    Deliveries {
        #[command(subcommand)]
        command: deliveries_cmd::DeliveriesCommand,
    },
    /// Check the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Set up this home: the interactive wizard, or `--from-hermes` to copy a Hermes home.
    Setup(setup_cmd::SetupArgs),
    /// List, enable and disable Hermes Python plugins; reload a running gateway's.
    Plugins {
        #[command(subcommand)]
        command: plugins_cmd::PluginsCommand,
    },
    /// List, test, add and remove MCP servers (config.yaml's mcp_servers).
    Mcp {
        #[command(subcommand)]
        command: mcp_cmd::McpCommand,
    },
    /// The web dashboard (served by the gateway at /dashboard): its login token.
    Dashboard {
        #[command(subcommand)]
        command: dashboard_cmd::DashboardCommand,
    },
    /// Scheduled jobs (Hermes's cron/jobs.json): list, add, remove, pause, resume, run.
    Schedule {
        #[command(subcommand)]
        command: schedule_cmd::ScheduleCommand,
    },
    /// Users who paired with a chat bot: list, approve a code, revoke, clear pending.
    Pairing {
        #[command(subcommand)]
        command: pairing_cmd::PairingCommand,
    },
    /// Check that the gateway on this home answers its health check (exit 0 healthy, 1
    /// not, 3 when none runs): for a container's HEALTHCHECK.
    Health(health_cmd::HealthArgs),
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Print every configuration finding (mistakes that drop or widen a route, targets
    /// without credentials); exit 1 when there is any.
    Check,
}

#[derive(Subcommand, Debug)]
enum GatewayCommand {
    /// Start the gateway (webhook listener) in the foreground.
    Run,
    /// Interactive setup: webhook listener, port, secret, one target, the model (answers
    /// may be piped).
    Setup,
    /// Is a gateway running on this home: its pid, ports and inbox counts by state
    /// (exit 0 when running, 3 when not).
    Status,
    /// Make the running gateway read .env again, rebuild its delivery targets and
    /// reload its Python plugins (it gets SIGHUP), without a restart.
    Reload,
}

/// mimalloc v3's `mi_option_t` indexes of the options herald sets.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Runs before any Rust allocation (an ELF constructor), so the first arena is already
/// committed lazily: this keeps the idle footprint near 9 MB instead of 15.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static CONFIGURE_ALLOCATOR: extern "C" fn() = configure_allocator;

#[cfg(target_os = "linux")]
extern "C" fn configure_allocator() {
    // SAFETY: mi_option_set only stores an integer option; it has no preconditions.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0);
        // Return freed memory after a second of disuse, not 10 ms: fewer syscalls under load.
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1000);
    }
}

/// How often freed memory is handed back to the system after a burst.
const MEMORY_RETURN_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// mimalloc returns freed pages only when the allocator runs again on their heap, so a
/// burst's memory can stay resident while the process is quiet: a background thread
/// collects every couple of seconds (a no-op when nothing is waiting to be returned).
fn start_memory_returner() {
    let _ = std::thread::Builder::new()
        .name("herald-memory".into())
        .spawn(|| {
            loop {
                std::thread::sleep(MEMORY_RETURN_EVERY);
                // SAFETY: mi_collect has no preconditions; `false` only purges what is due.
                unsafe { libmimalloc_sys::mi_collect(false) };
            }
        });
}

/// Every option that takes a value accepts one starting with `-` (a Telegram group id
/// such as `-100123456789`, a prompt such as `-v means verbose`), in every subcommand.
fn accept_leading_hyphens(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| {
            if !arg.is_positional() && arg.get_action().takes_values() {
                arg.allow_hyphen_values(true)
            } else {
                arg
            }
        })
        .mut_subcommands(accept_leading_hyphens)
}

fn parse_cli() -> Cli {
    let matches = accept_leading_hyphens(Cli::command()).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// True when the error chain holds a closed pipe: the reader went away, not a failure.
fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = parse_cli();
    if let Some(home) = &cli.home {
        // Commands the agent runs (`herald webhook subscribe ...` from the
        // webhook-subscriptions skill) act on this same home.
        // SAFETY: no other thread exists yet, so nothing reads the environment meanwhile.
        unsafe { std::env::set_var("HERALD_HOME", home) };
    }
    let conversation = matches!(cli.command, Some(Command::Chat(_)));
    logging::init(cli.verbose, cli.log_format, conversation);
    let home = cli.home.map(Home::new).unwrap_or_else(Home::from_env);
    let Some(command) = cli.command else {
        outln!("{OVERVIEW}\n\nAll commands and options: herald --help");
        return ExitCode::SUCCESS;
    };
    let result = match command {
        Command::Gateway {
            command: GatewayCommand::Run,
        } => {
            start_memory_returner();
            gateway_cmd::run(&home)
        }
        Command::Gateway {
            command: GatewayCommand::Setup,
        } => setup_cmd::run(&home),
        Command::Gateway {
            command: GatewayCommand::Status,
        } => gateway_status::run(&home),
        Command::Gateway {
            command: GatewayCommand::Reload,
        } => gateway_status::reload(&home),
        Command::Config {
            command: ConfigCommand::Check,
        } => config_check::run(&home),
        Command::Setup(args) => setup_cmd::run_setup(&home, args),
        Command::Inbox { command } => inbox_cmd::run(&home, command),
        Command::Webhook { command } => webhook_cmd::run(&home, command),
        Command::Chat(args) => chat_cmd::run(&home, args),
        Command::Rpc(args) => rpc_cmd::run(&home, args),
        Command::Acp(args) => acp_cmd::run(&home, args),
        Command::Deliveries { command } => deliveries_cmd::run(&home, command),
        Command::Store { command } => store_cmd::run(&home, command),
        Command::Plugins { command } => plugins_cmd::run(&home, command),
        Command::Mcp { command } => mcp_cmd::run(&home, command),
        Command::Health(args) => health_cmd::run(&home, args),
        Command::Dashboard { command } => dashboard_cmd::run(&home, command),
        Command::Pairing { command } => pairing_cmd::run(&home, command),
        Command::Schedule { command } => schedule_cmd::run(&home, command),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

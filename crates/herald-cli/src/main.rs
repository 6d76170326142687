//! The `herald` binary: command-line parsing, logging setup and wiring of the crates.

mod agent_setup;
mod chat_cmd;
mod deliveries_cmd;
mod gateway_cmd;
mod inbox_cmd;
mod logging;
mod model_select;
mod setup_cmd;
mod webhook_cmd;

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
    /// Manage webhook subscriptions (dynamic routes).
    Webhook {
        #[command(subcommand)]
        command: webhook_cmd::WebhookCommand,
    },
    /// Talk to the agent: `-q TEXT` for one turn, or a session on stdin.
    Chat(chat_cmd::ChatArgs),
    /// Inspect deliveries (direct deliveries and their outcome).
    Deliveries {
        #[command(subcommand)]
        command: deliveries_cmd::DeliveriesCommand,
    },
}

#[derive(Subcommand, Debug)]
enum GatewayCommand {
    /// Start the gateway (webhook listener) in the foreground.
    Run,
    /// Interactive setup: webhook listener, port, secret, one target (answers may be piped).
    Setup,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.verbose, cli.log_format);
    let home = cli.home.map(Home::new).unwrap_or_else(Home::from_env);
    let result = match cli.command {
        Command::Gateway {
            command: GatewayCommand::Run,
        } => {
            start_memory_returner();
            gateway_cmd::run(&home)
        }
        Command::Gateway {
            command: GatewayCommand::Setup,
        } => setup_cmd::run(&home),
        Command::Inbox { command } => inbox_cmd::run(&home, command),
        Command::Webhook { command } => webhook_cmd::run(&home, command),
        Command::Chat(args) => chat_cmd::run(&home, args),
        Command::Deliveries { command } => deliveries_cmd::run(&home, command),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("herald: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! Log setup: human-readable or JSON lines on stderr, `-v` or `RUST_LOG` for detail.

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `conversation`: a terminal conversation (`herald chat`), where the log shares the
/// screen with the answers: without `-v` only warnings and errors are shown (no INFO lines
/// about the plugin host or the store).
pub fn init(verbose: u8, format: LogFormat, conversation: bool) {
    let default = match verbose {
        0 if conversation => "warn",
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    // Library noise stays at warn unless asked for explicitly; the MCP SDK's own
    // warnings (a refused request from a server, per request) at error.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("warn,herald={default},herald_gateway={default},herald_store={default},herald_webhook={default},herald_config={default},herald_plugins={default},herald_mcp={default},rmcp=error")));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

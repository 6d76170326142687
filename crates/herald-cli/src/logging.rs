//! Log setup: human-readable or JSON lines on stderr, `-v` or `RUST_LOG` for detail.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

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
        .unwrap_or_else(|_| EnvFilter::new(format!("warn,herald={default},herald_app={default},herald_gateway={default},herald_store={default},herald_webhook={default},herald_config={default},herald_plugins={default},herald_mcp={default},rmcp=error")));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // herald's trace spans are exported (when an exporter starts), never logged.
    let filter = filter.add_directive(
        format!("{}=off", herald_trace::TARGET)
            .parse()
            .unwrap_or_default(),
    );
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let fmt: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Text => fmt.with_target(false).with_filter(filter).boxed(),
        LogFormat::Json => fmt.json().flatten_event(true).with_filter(filter).boxed(),
    };
    let trace: Box<dyn Layer<Registry> + Send + Sync> = herald_trace::layer().boxed();
    let _ = tracing_subscriber::registry()
        .with(vec![trace, fmt])
        .try_init();
}

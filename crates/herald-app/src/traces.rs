//! `tracing:` and the `OTEL_*` variables applied: OTLP export of herald's trace in
//! every process that runs agents (the gateway, `herald rpc`, `herald acp`, `herald
//! chat`).

use herald_config::tracing_settings::TracingSettings;
use herald_trace::{Guard, Protocol, Settings};

/// Starts exporting when the settings or the environment ask for it; a setting that
/// cannot work is said once, and herald serves without traces.
pub fn start(t: &TracingSettings) -> Option<Guard> {
    let settings = Settings {
        configured: t.present && t.enabled,
        disabled: t.present && !t.enabled,
        endpoint: t.endpoint.clone(),
        protocol: t.protocol.as_deref().and_then(Protocol::parse),
        service_name: t.service_name.clone(),
        headers: t.headers.clone(),
    };
    match herald_trace::start(&settings) {
        Ok(guard) => {
            if guard.is_some() {
                tracing::info!("traces are exported over OTLP");
            }
            guard
        }
        Err(e) => {
            tracing::warn!(error = %e, "traces are not exported");
            None
        }
    }
}

//! The `mcpServers` an ACP client sends with `session/new`, `load`, `resume` and
//! `fork`: stdio, Streamable HTTP and SSE servers (what `mcpCapabilities` advertises) become
//! the session's own servers, started and stopped with it. herald keeps them per
//! session, where Hermes registers them process-wide.

use agent_client_protocol::v1::schema::{McpCapabilities, McpServer};
use herald_config::{McpServerSettings, McpTransport};

/// What herald serves of the client's servers: stdio (every agent must), HTTP and SSE.
pub fn capabilities() -> McpCapabilities {
    McpCapabilities::new().http(true).sse(true)
}

/// The client's servers as settings.
pub fn settings_of(servers: &[McpServer]) -> Vec<McpServerSettings> {
    servers.iter().filter_map(setting).collect()
}

fn setting(server: &McpServer) -> Option<McpServerSettings> {
    let (name, transport) = match server {
        McpServer::Stdio(s) => (
            s.name.clone(),
            McpTransport::Stdio {
                command: s.command.display().to_string(),
                args: s.args.clone(),
                env: s
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect(),
            },
        ),
        McpServer::Http(h) => (
            h.name.clone(),
            McpTransport::Http {
                url: h.url.clone(),
                headers: h
                    .headers
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect(),
            },
        ),
        McpServer::Sse(s) => (
            s.name.clone(),
            McpTransport::Sse {
                url: s.url.clone(),
                headers: s
                    .headers
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect(),
            },
        ),
        _ => return None,
    };
    let name = name.trim().to_owned();
    (!name.is_empty()).then(|| McpServerSettings::new(name, transport))
}

//! herald's MCP client. The servers of `mcp_servers:` (and those an ACP client passes
//! for one session) are connected in the background over the official Rust SDK
//! (`rmcp`): stdio children in their own process group with a filtered environment, or
//! Streamable HTTP, or the older HTTP+SSE (`transport: sse`). Their tools become agent tools named as Hermes names them
//! (`mcp__<server>__<tool>`, toolset `mcp-<server>`), with schemas normalised for strict
//! providers, results in Hermes's shapes wrapped as untrusted output, and credentials
//! stripped from error text. A slow or failing server never stalls a turn: the first
//! turn waits at most `mcp_discovery_timeout`, failures are logged once and retried with
//! back-off, and a server that dies mid-call gives the model an error result.

pub mod children;
mod connection;
mod env;
pub mod handler;
mod listing;
mod meter;
pub mod naming;
pub mod pool;
pub mod render;
pub mod sampling;
pub mod schema;
pub mod server;
mod sse;
mod suspicious;
mod tls;
pub mod tool;

pub use pool::{McpGrant, McpPool, ServerReport};
pub use sampling::Sampler;

//! The JSON-RPC gateway (rpc-gateway.md): newline-delimited JSON-RPC 2.0 on stdio
//! (`herald rpc`) or WebSocket (`herald rpc --ws`), one dispatcher behind both.
//!
//! A front door on the session host: live conversations, turns, approvals, rewind and
//! branch are `herald-session`'s; this crate maps them onto the gateway's methods,
//! events and error codes, and binds each live conversation to a client.

mod absent;
mod answers;
mod catalog;
mod commands;
mod completion;
pub mod connection;
mod delegation;
mod display;
pub mod errors;
pub mod events;
mod extras;
pub mod frame;
pub mod gateway;
mod hub;
mod info;
mod methods;
pub mod outbox;
pub mod params;
mod prompts;
pub mod results;
mod sessions;
mod spawn_trees;
pub mod stdio;
mod turns;
pub mod ws;

pub use gateway::Gateway;

/// Runs blocking work (files, `state.db`) on tokio's blocking pool, off the async
/// workers; a panic there is a failed method, not a lost connection.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, errors::RpcError> + Send + 'static,
) -> Result<T, errors::RpcError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|_| {
        Err(errors::RpcError::new(
            errors::RpcError::FAILED,
            "the method stopped unexpectedly",
        ))
    })
}

//! The herald process below its binary: the async runtime every command runs on, the
//! store the home keeps ([`stores`]), OTLP trace export ([`traces`]), the signals it
//! stops on ([`signals`], [`systemd`]), the session host of an interactive door
//! ([`interactive`]), the whole gateway server ([`server`]) and the JSON-RPC WebSocket
//! listener ([`rpc_server`]), so that `herald
//! gateway run`, `chat`, `rpc` and `acp` are assembled in one place, with the same store
//! and trace export.

pub mod gateway_state;
pub mod interactive;
pub mod rpc_server;
pub mod server;
pub mod signals;
pub(crate) mod start_pages;
pub mod stores;
pub mod systemd;
pub mod traces;

pub use interactive::{
    HostFor, Interactive, InteractiveError, build_interactive, open_interactive,
};

/// The multi-threaded async runtime every serving command runs on (its threads named
/// `herald-worker`).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("herald-worker")
        .build()
}

/// A one-thread runtime for a command's store calls.
pub fn command_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

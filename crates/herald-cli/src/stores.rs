//! The home's stores as herald-app opens them, for the CLI's commands, and the
//! one-thread runtime a command awaits them on.

use anyhow::Context;

pub use herald_app::stores::{Access, open};

/// A one-thread runtime for a command's store calls.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    herald_app::command_runtime().context("cannot start the async runtime")
}

//! The inbox the CLI commands read and change, as the home's configuration keeps it,
//! and the small runtime they await it on.

use anyhow::Context;
use herald_config::Home;
use herald_store::Store;

/// What a command does with the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only (beside a running gateway, without taking its writer's place).
    Read,
    /// Changes entries (replay, purge).
    Write,
}

/// The home's inbox, or `None` when it has none yet (nothing was ever accepted).
pub fn open(home: &Home, access: Access) -> anyhow::Result<Option<Store>> {
    let path = home.database_file();
    if !path.exists() {
        return Ok(None);
    }
    let store = match access {
        Access::Read => Store::open_read_only(&path),
        Access::Write => Store::open(&path),
    };
    Ok(Some(store.with_context(|| {
        format!("cannot open the inbox at {}", path.display())
    })?))
}

/// A one-thread runtime for a command's store calls.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

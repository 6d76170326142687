//! The stores as the home's configuration keeps them (SQLite in the home, or the
//! PostgreSQL database of `store:`): the inbox for the gateway and for the CLI
//! commands that read and change it, the session stores of the gateway's hosts, and
//! the small runtime those commands await them on.

use anyhow::Context;
use herald_config::{
    Config, Home, PostgresSettings, StoreBackend, StoreSettings, load_dotenv, process_env,
};
use herald_store::{SessionStore, Store};
use std::sync::Arc;

/// What a command does with the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only (beside a running gateway, without taking its writer's place).
    Read,
    /// Changes entries (replay, purge).
    Write,
}

/// The instance name the CLI's own changes are made as (it claims nothing).
const CLI_INSTANCE: &str = "herald-cli";

/// The home's inbox for a CLI command, opened on the runtime `rt` its calls are then
/// awaited on, or `None` when a SQLite home has none yet (nothing was ever accepted).
pub fn open(
    home: &Home,
    access: Access,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<Store>> {
    match backend_of(home)? {
        StoreBackend::Sqlite => open_sqlite(home, access),
        StoreBackend::Postgres(pg) => rt.block_on(open_postgres(&pg, CLI_INSTANCE)).map(Some),
    }
}

/// The gateway's inbox, as `config` keeps it; on PostgreSQL it claims as this home's
/// instance.
pub async fn open_for_gateway(config: &Config) -> anyhow::Result<Store> {
    match &config.store.backend {
        StoreBackend::Sqlite => {
            let path = config.home.database_file();
            Store::open_within(&path, config.inbox.dedup_memory_bytes)
                .with_context(|| format!("cannot open the inbox at {}", path.display()))
        }
        StoreBackend::Postgres(pg) => {
            let instance = instance_of(&config.home)?;
            let store = open_postgres(pg, &instance).await?;
            tracing::info!(store = %pg.display_url(), instance, "inbox on PostgreSQL");
            Ok(store)
        }
    }
}

/// The session store of `home` (the main home, or a profile's under it, named
/// `profile`) as `store` keeps it: its `state.db`, or that profile's schema of the
/// shared database.
pub async fn open_sessions(
    store: &StoreSettings,
    home: &Home,
    main_home: &Home,
    profile: Option<&str>,
) -> anyhow::Result<SessionStore> {
    match &store.backend {
        StoreBackend::Sqlite => {
            let path = home.state_db_file();
            SessionStore::open(&path).with_context(|| format!("cannot open {}", path.display()))
        }
        StoreBackend::Postgres(pg) => {
            let instance = instance_of(main_home)?;
            let sessions = herald_scale::open_sessions(pg, profile, &instance).await?;
            let owner = sessions.owner().to_owned();
            Ok(SessionStore::on(Arc::new(sessions)).owned_by(&owner))
        }
    }
}

async fn open_postgres(pg: &PostgresSettings, instance: &str) -> anyhow::Result<Store> {
    let inbox = herald_scale::open_inbox(pg, instance).await?;
    Ok(Store::on(Arc::new(inbox)))
}

fn open_sqlite(home: &Home, access: Access) -> anyhow::Result<Option<Store>> {
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

/// Where the home keeps its store: `store:` of its config.yaml, or
/// `HERALD_STORE_URL` (from `.env` too).
fn backend_of(home: &Home) -> anyhow::Result<StoreBackend> {
    load_dotenv(home)?;
    let config = Config::load(home, &process_env)
        .with_context(|| "cannot read the configuration to find the store")?;
    Ok(config.store.backend)
}

/// This home's instance name on a shared store: made once and kept in the home
/// (`instance_id`), so that a restart on the same home takes back its own leases.
pub fn instance_of(home: &Home) -> anyhow::Result<String> {
    let path = home.root().join("instance_id");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let name = text.trim();
        if !name.is_empty() && name.len() <= 200 {
            return Ok(name.to_owned());
        }
    }
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "herald".to_owned());
    let id = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("{host}-{}", &id[..12]);
    std::fs::create_dir_all(home.root())
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    std::fs::write(&path, format!("{name}\n"))
        .with_context(|| format!("cannot keep the instance name in {}", path.display()))?;
    Ok(name)
}

/// A one-thread runtime for a command's store calls.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

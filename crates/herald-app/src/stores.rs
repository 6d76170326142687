//! The stores as the home's configuration keeps them (SQLite in the home, or the
//! PostgreSQL database of `store:`): the inbox for the gateway and for the CLI
//! commands that read and change it, and the session store of every door's host, so
//! that sessions of every door are one set on a shared store.

use herald_config::{
    Config, Home, PostgresSettings, StoreBackend, StoreSettings, load_dotenv, process_env,
};
use herald_store::{SessionStore, Store};
use std::path::PathBuf;
use std::sync::Arc;

/// Why a store could not be opened; the text is said to the user.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open {what} at {path}: {reason}")]
    File {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{0}")]
    Database(#[from] herald_scale::ScaleError),
    #[error("cannot read the configuration to find the store: {0}")]
    Config(String),
    #[error("cannot keep the instance name in {path}: {reason}")]
    Instance { path: PathBuf, reason: String },
}

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
) -> Result<Option<Store>, OpenError> {
    match backend_of(home)? {
        StoreBackend::Sqlite => open_sqlite(home, access),
        StoreBackend::Postgres(pg) => rt.block_on(open_postgres(&pg, CLI_INSTANCE)).map(Some),
    }
}

/// The gateway's inbox, as `config` keeps it; on PostgreSQL it claims as this home's
/// instance.
pub async fn open_for_gateway(config: &Config) -> Result<Store, OpenError> {
    match &config.store.backend {
        StoreBackend::Sqlite => {
            let path = config.home.database_file();
            Store::open_within(&path, config.inbox.dedup_memory_bytes).map_err(|e| {
                OpenError::File {
                    what: "the inbox",
                    path: path.clone(),
                    reason: e.to_string(),
                }
            })
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
) -> Result<SessionStore, OpenError> {
    match &store.backend {
        StoreBackend::Sqlite => {
            let path = home.state_db_file();
            SessionStore::open(&path).map_err(|e| OpenError::File {
                what: "the session store",
                path,
                reason: e.to_string(),
            })
        }
        StoreBackend::Postgres(pg) => {
            let instance = instance_of(main_home)?;
            let sessions = herald_scale::open_sessions(pg, profile, &instance).await?;
            let owner = sessions.owner().to_owned();
            Ok(SessionStore::on(Arc::new(sessions)).owned_by(&owner))
        }
    }
}

async fn open_postgres(pg: &PostgresSettings, instance: &str) -> Result<Store, OpenError> {
    let inbox = herald_scale::open_inbox(pg, instance).await?;
    Ok(Store::on(Arc::new(inbox)))
}

fn open_sqlite(home: &Home, access: Access) -> Result<Option<Store>, OpenError> {
    let path = home.database_file();
    if !path.exists() {
        return Ok(None);
    }
    let store = match access {
        Access::Read => Store::open_read_only(&path),
        Access::Write => Store::open(&path),
    };
    store.map(Some).map_err(|e| OpenError::File {
        what: "the inbox",
        path,
        reason: e.to_string(),
    })
}

/// Where the home keeps its store: `store:` of its config.yaml, or
/// `HERALD_STORE_URL` (from `.env` too).
fn backend_of(home: &Home) -> Result<StoreBackend, OpenError> {
    load_dotenv(home).map_err(|e| OpenError::Config(e.to_string()))?;
    let config = Config::load(home, &process_env).map_err(|e| OpenError::Config(e.to_string()))?;
    Ok(config.store.backend)
}

/// This home's instance name on a shared store: made once and kept in the home
/// (`instance_id`), so that a restart on the same home takes back its own leases.
pub fn instance_of(home: &Home) -> Result<String, OpenError> {
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
    let kept = std::fs::create_dir_all(home.root())
        .and_then(|()| std::fs::write(&path, format!("{name}\n")));
    kept.map_err(|e| OpenError::Instance {
        path,
        reason: e.to_string(),
    })?;
    Ok(name)
}

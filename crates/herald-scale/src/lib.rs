//! herald's store on PostgreSQL, for several instances behind one load balancer
//! sharing one database (architecture: "Scale"). It implements the store's one
//! interface ([`herald_store::InboxBackend`]), so nothing above the store knows which
//! backend it has:
//!
//! - accepted events are committed with `synchronous_commit` on before the caller
//!   hears back, many requests sharing one statement and one commit (group commit);
//! - dedup keys are rows with a unique key, so two instances accept a delivery id once;
//! - workers claim with `FOR UPDATE SKIP LOCKED` under a lease naming their instance;
//!   a lease that runs out (its instance died) is taken over, and an instance
//!   restarted on its home takes its own back at once;
//! - `LISTEN`/`NOTIFY` wakes idle workers of every instance when work is queued;
//! - numbered migrations run at start under an advisory lock.

mod connect;
mod deadline;
mod enqueue;
mod follow;
mod holds;
pub mod import;
mod inbox;
mod listen;
mod migrate;
mod replies;
mod rows;
mod session_schema;
mod sessions;
mod staging;

pub use inbox::PgInbox;
pub use sessions::{INSTANCE_LOST, PgSessions, SESSION_WRITES};

use herald_config::PostgresSettings;
use herald_store::StoreError;

/// What can go wrong reaching the database.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// The settings cannot work (a URL the driver refuses, an unreadable CA bundle).
    #[error("{0}")]
    Config(String),
    /// The database could not be reached or refused the login.
    #[error("cannot connect to the store at {url}: {reason}")]
    Connect { url: String, reason: String },
    /// A statement failed.
    #[error("store: {0}")]
    Database(String),
    #[error(
        "the store's schema is version {found}, newer than this herald ({supported}); upgrade herald"
    )]
    TooNew { found: i64, supported: i64 },
}

impl ScaleError {
    pub(crate) fn connect(url: &str, e: &tokio_postgres::Error) -> ScaleError {
        ScaleError::Connect {
            url: url.to_owned(),
            reason: connect_reason(e),
        }
    }
}

impl From<ScaleError> for StoreError {
    fn from(e: ScaleError) -> StoreError {
        match e {
            ScaleError::Connect { .. } => StoreError::Unreachable(e.to_string()),
            other => StoreError::Database(other.to_string()),
        }
    }
}

/// A failed connection in words a user can act on: wrong credentials, a missing
/// database, nobody listening.
fn connect_reason(e: &tokio_postgres::Error) -> String {
    use tokio_postgres::error::SqlState;
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        let hint = if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            " (check the user in store.url and the password: in the URL or HERALD_STORE_PASSWORD)"
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            " (create it first: createdb, or CREATE DATABASE)"
        } else {
            ""
        };
        return format!("{}{hint}", db.message());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// A statement's failure as the store reports it (one the server cancelled at
/// `statement_timeout` is a timeout).
pub(crate) fn db_error(e: tokio_postgres::Error) -> StoreError {
    use tokio_postgres::error::SqlState;
    match e.as_db_error() {
        Some(db) if *db.code() == SqlState::QUERY_CANCELED => {
            StoreError::TimedOut(format!("{} ({})", db.message(), db.code().code()))
        }
        Some(db) => StoreError::Database(format!("{} ({})", db.message(), db.code().code())),
        None if e.is_closed() => StoreError::Unreachable(e.to_string()),
        None => StoreError::Database(connect_reason(&e)),
    }
}

/// Connects, migrates (under the advisory lock) and starts the inbox of `instance`:
/// a name that stays the same across restarts of one home, so that its own leases
/// come back to it.
pub async fn open_inbox(
    settings: &PostgresSettings,
    instance: &str,
) -> Result<PgInbox, ScaleError> {
    let target = connect::Target::of(settings)?;
    let mut client = target.connect_one().await?;
    migrate::migrate(&mut client, &migrate::INBOX).await?;
    drop(client);
    let pool = target.pool(settings.pool_size)?;
    Ok(PgInbox::start(pool, target, instance.to_owned()))
}

/// The schema a profile's sessions live in: `public` for the default profile, else
/// `herald_profile_<name>` (profile names are lowercase letters, digits, `_` and `-`).
pub fn schema_of(profile: Option<&str>) -> Result<String, ScaleError> {
    let Some(name) = profile.filter(|p| *p != "default") else {
        return Ok("public".to_owned());
    };
    let plain = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !plain {
        return Err(ScaleError::Config(format!(
            "`{name}` is not a profile name"
        )));
    }
    Ok(format!("herald_profile_{}", name.replace('-', "_")))
}

/// Connects, migrates (under the advisory lock) and starts the session store of
/// `profile` (`None`: the default one) for `instance`. Save its runs as
/// [`PgSessions::owner`].
pub async fn open_sessions(
    settings: &PostgresSettings,
    profile: Option<&str>,
    instance: &str,
) -> Result<PgSessions, ScaleError> {
    let schema = schema_of(profile)?;
    let base = connect::Target::of(settings)?;
    let client = base.connect_one().await?;
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await
        .map_err(|e| ScaleError::Database(connect_reason(&e)))?;
    drop(client);
    let target = base.in_schema(&schema);
    let mut client = target.connect_one().await?;
    migrate::migrate(&mut client, &session_schema::SESSIONS).await?;
    drop(client);
    let pool = target.pool(settings.pool_size)?;
    PgSessions::start(pool, target, instance)
        .await
        .map_err(|e| ScaleError::Database(e.to_string()))
}

/// Connects once and reports whether the store is usable: how `herald config check`
/// tells a bad URL, wrong credentials or a missing database.
pub async fn check(settings: &PostgresSettings) -> Result<(), ScaleError> {
    let target = connect::Target::of(settings)?;
    let client = target.connect_one().await?;
    client
        .simple_query("SELECT 1")
        .await
        .map_err(|e| ScaleError::Database(connect_reason(&e)))?;
    Ok(())
}

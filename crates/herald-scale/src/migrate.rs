//! Numbered SQL migrations, applied at start under an advisory lock so that two
//! instances starting at once do not race; each in its own transaction, recorded in
//! `herald_schema`.

use crate::ScaleError;
use tokio_postgres::Client;

/// The advisory lock key of herald's migrations ("herald" in ASCII).
const LOCK: i64 = 0x6865_7261_6c64;

const MIGRATIONS: &[&str] = &[
    // 1: the inbox, its attempts, dedup keys and deliveries (the columns of the SQLite
    // inbox; payloads as bytes, compressed when `payload_packed`).
    "CREATE TABLE inbox (
        id                 BIGSERIAL PRIMARY KEY,
        route              TEXT NOT NULL,
        event_type         TEXT NOT NULL,
        delivery_id        TEXT NOT NULL,
        state              TEXT NOT NULL DEFAULT 'queued',
        attempts           BIGINT NOT NULL DEFAULT 0,
        received_at_ms     BIGINT NOT NULL,
        updated_at_ms      BIGINT NOT NULL,
        profile            TEXT,
        headers            TEXT NOT NULL,
        payload            BYTEA NOT NULL,
        payload_packed     BOOLEAN NOT NULL,
        prompt             TEXT NOT NULL,
        deliver            TEXT NOT NULL,
        deliver_extra      TEXT NOT NULL,
        skills             TEXT NOT NULL,
        toolsets           TEXT,
        last_error         TEXT,
        answer             TEXT,
        next_attempt_at_ms BIGINT NOT NULL DEFAULT 0,
        lease_until_ms     BIGINT,
        lease_owner        TEXT,
        failures           BIGINT NOT NULL DEFAULT 0,
        failing_since_ms   BIGINT,
        delivery_attempts  BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX inbox_waiting ON inbox (id) WHERE state IN ('queued', 'delivering');
    CREATE INDEX inbox_leased ON inbox (lease_until_ms) WHERE state = 'running';
    CREATE INDEX inbox_owner ON inbox (lease_owner) WHERE state = 'running';
    CREATE INDEX inbox_state ON inbox (state, id);
    CREATE INDEX inbox_route ON inbox (route, id);
    CREATE TABLE inbox_attempts (
        id             BIGSERIAL PRIMARY KEY,
        inbox_id       BIGINT NOT NULL,
        stage          TEXT NOT NULL,
        started_at_ms  BIGINT NOT NULL,
        finished_at_ms BIGINT NOT NULL,
        outcome        TEXT NOT NULL,
        error          TEXT
    );
    CREATE INDEX inbox_attempts_item ON inbox_attempts (inbox_id, id);
    CREATE TABLE dedup (
        route       TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        seen_at_ms  BIGINT NOT NULL,
        PRIMARY KEY (route, delivery_id)
    );
    CREATE INDEX dedup_seen ON dedup (seen_at_ms);
    CREATE TABLE deliveries (
        id            BIGSERIAL PRIMARY KEY,
        kind          TEXT NOT NULL,
        route         TEXT NOT NULL,
        delivery_id   TEXT NOT NULL,
        target        TEXT NOT NULL,
        status        TEXT NOT NULL,
        attempts      BIGINT NOT NULL,
        latency_ms    BIGINT NOT NULL,
        error         TEXT,
        message       TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL
    );
    CREATE INDEX deliveries_route ON deliveries (route, id);
    CREATE INDEX deliveries_delivery_id ON deliveries (delivery_id);",
    // 2: one direct send per (route, delivery id) across instances: a hold while it
    // is sent.
    "CREATE TABLE direct_sends (
        send_key TEXT PRIMARY KEY,
        owner    TEXT NOT NULL,
        until_ms BIGINT NOT NULL
    );",
    // 3: documents every instance shares (the webhook subscriptions), versioned.
    "CREATE TABLE herald_documents (
        name          TEXT PRIMARY KEY,
        version       BIGINT NOT NULL,
        body          TEXT NOT NULL,
        updated_at_ms BIGINT NOT NULL
    );",
    // 4: finished entries by age, for the retention's prune.
    "CREATE INDEX inbox_finished ON inbox (state, updated_at_ms) WHERE state IN ('delivered', 'dead', 'cancelled');
     CREATE INDEX deliveries_created ON deliveries (created_at_ms);",
];

/// One numbered list of migrations and the table that records how far it went.
pub(crate) struct Migrations {
    pub list: &'static [&'static str],
    /// The version table, in the schema the connection's `search_path` names.
    pub table: &'static str,
}

/// The inbox's tables.
pub(crate) const INBOX: Migrations = Migrations {
    list: MIGRATIONS,
    table: "herald_schema",
};

/// Brings the database (the connection's schema) to this build's `m`.
pub(crate) async fn migrate(client: &mut Client, m: &Migrations) -> Result<(), ScaleError> {
    let db = |e: tokio_postgres::Error| ScaleError::Database(crate::connect_reason(&e));
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK])
        .await
        .map_err(db)?;
    let outcome = apply(client, m).await;
    // The lock also ends with the connection; unlocking here lets the next instance
    // go on at once.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK])
        .await;
    outcome?;
    unlocked.map_err(db)?;
    Ok(())
}

async fn apply(client: &mut Client, m: &Migrations) -> Result<(), ScaleError> {
    let db = |e: tokio_postgres::Error| ScaleError::Database(crate::connect_reason(&e));
    let table = m.table;
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (
                version INTEGER PRIMARY KEY,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )"
        ))
        .await
        .map_err(db)?;
    let row = client
        .query_one(
            &format!("SELECT COALESCE(MAX(version), 0)::BIGINT FROM {table}"),
            &[],
        )
        .await
        .map_err(db)?;
    let found: i64 = row.try_get(0).map_err(db)?;
    let supported = m.list.len() as i64;
    if found > supported {
        return Err(ScaleError::TooNew { found, supported });
    }
    for (i, sql) in m.list.iter().enumerate().skip(found.max(0) as usize) {
        let version = (i + 1) as i32;
        let tx = client.transaction().await.map_err(db)?;
        tx.batch_execute(sql).await.map_err(db)?;
        tx.execute(
            &format!("INSERT INTO {table} (version) VALUES ($1)"),
            &[&version],
        )
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        tracing::info!(version, table, "store schema migrated");
    }
    Ok(())
}

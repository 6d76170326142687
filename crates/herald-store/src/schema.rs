//! Numbered migrations applied against `PRAGMA user_version`.

use rusqlite::Connection;

pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the inbox and its dedup keys.
    "CREATE TABLE inbox (
        id             INTEGER PRIMARY KEY,
        route          TEXT NOT NULL,
        event_type     TEXT NOT NULL,
        delivery_id    TEXT NOT NULL,
        state          TEXT NOT NULL DEFAULT 'queued',
        attempts       INTEGER NOT NULL DEFAULT 0,
        received_at_ms INTEGER NOT NULL,
        updated_at_ms  INTEGER NOT NULL,
        profile        TEXT,
        headers        TEXT NOT NULL,
        payload        TEXT NOT NULL,
        prompt         TEXT NOT NULL,
        deliver        TEXT NOT NULL,
        deliver_extra  TEXT NOT NULL,
        skills         TEXT NOT NULL,
        toolsets       TEXT,
        last_error     TEXT
    );
    CREATE INDEX inbox_state ON inbox(state, id);
    CREATE TABLE dedup (
        route       TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        seen_at_ms  INTEGER NOT NULL,
        PRIMARY KEY (route, delivery_id)
    ) WITHOUT ROWID;
    CREATE INDEX dedup_seen ON dedup(seen_at_ms);",
    // 2: direct deliveries (and, later, agent answers) with their outcome.
    "CREATE TABLE deliveries (
        id            INTEGER PRIMARY KEY,
        kind          TEXT NOT NULL,
        route         TEXT NOT NULL,
        delivery_id   TEXT NOT NULL,
        target        TEXT NOT NULL,
        status        TEXT NOT NULL,
        attempts      INTEGER NOT NULL,
        latency_ms    INTEGER NOT NULL,
        error         TEXT,
        message       TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    );
    CREATE INDEX deliveries_route ON deliveries(route, id);",
    // 3: the inbox as a work queue: leases, retry times, the stored answer, and every
    // attempt (agent run or delivery) with its outcome.
    "ALTER TABLE inbox ADD COLUMN answer TEXT;
    ALTER TABLE inbox ADD COLUMN next_attempt_at_ms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE inbox ADD COLUMN lease_until_ms INTEGER;
    ALTER TABLE inbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE inbox ADD COLUMN failing_since_ms INTEGER;
    ALTER TABLE inbox ADD COLUMN delivery_attempts INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE inbox_attempts (
        id             INTEGER PRIMARY KEY,
        inbox_id       INTEGER NOT NULL,
        stage          TEXT NOT NULL,
        started_at_ms  INTEGER NOT NULL,
        finished_at_ms INTEGER NOT NULL,
        outcome        TEXT NOT NULL,
        error          TEXT
    );
    CREATE INDEX inbox_attempts_item ON inbox_attempts(inbox_id, id);",
    // 4: an accepted event's inbox row is its dedup key (see `dedup_keys`): the keys of
    // the last hour are read from this index at start, not from the rows themselves.
    "CREATE INDEX inbox_received ON inbox(received_at_ms, route, delivery_id);",
    // 5: delivery records by age, for the retention's prune.
    "CREATE INDEX deliveries_created ON deliveries(created_at_ms);",
    // 6: the dashboard's search over delivery ids, event types and prompts (see
    // `events`): a trigram index the dashboard fills off the accept path.
    "CREATE VIRTUAL TABLE inbox_fts USING fts5(delivery_id, event_type, prompt,
         content='', contentless_delete=1, tokenize='trigram');
     CREATE TABLE inbox_fts_state (last_id INTEGER NOT NULL);
     INSERT INTO inbox_fts_state VALUES (0);",
    // 7: the search index without positions (`detail=none`, about the size of the text
    // it indexes instead of six times it), rebuilt by the dashboard beside the writer
    // (see `search_index`).
    "DROP TABLE inbox_fts;
     CREATE VIRTUAL TABLE inbox_fts USING fts5(delivery_id, event_type, prompt,
         content='', contentless_delete=1, detail=none, tokenize='trigram');
     UPDATE inbox_fts_state SET last_id = 0;",
];

/// Brings `herald.db` to the newest schema.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    apply(conn, MIGRATIONS)
}

/// Applies the migrations a database has not had yet, each in its own transaction,
/// numbering them in `PRAGMA user_version`.
pub(crate) fn apply(conn: &mut Connection, migrations: &[&str]) -> rusqlite::Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in migrations.iter().enumerate().skip(current.max(0) as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

/// The schema version this build writes.
pub fn latest_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Database files hold event payloads and conversations: owner-only (best effort).
/// Called before SQLite opens the database: a missing file is created empty with mode
/// 0600, since SQLite gives the `-wal` and `-shm` files it creates the database file's
/// permissions; an existing file and its companions (stores of older builds) are set to
/// 0600.
pub(crate) fn restrict_to_owner(path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

//! `herald store migrate --from-sqlite`: a home's SQLite inbox (`herald.db`) and
//! session store (`state.db`) copied into the PostgreSQL store, page by page. A page is
//! at most [`PAGE`] rows and [`PAGE_BYTES`] of values (a row larger than that is a page
//! of its own), streamed with `COPY ... FROM STDIN (FORMAT binary)` into a temporary
//! table and moved into place by one statement, in one transaction per page: memory
//! stays about a page, whatever the table holds. Row ids are kept (clients cache
//! message row ids) and the sequences set past them. Copying again skips what is there
//! (`ON CONFLICT DO NOTHING`), so a run cut off is finished by running it again; tables
//! keyed by a row id resume after the highest id already copied.

use crate::staging::{self, Kind};
use crate::{ScaleError, connect};
use herald_config::PostgresSettings;
use herald_store::export::Export;
use tokio_postgres::Client;

/// Rows per page at most.
pub const PAGE: usize = 500;
/// Bytes of values per page at most (one larger row goes alone).
pub const PAGE_BYTES: usize = 8 << 20;

/// One table's copy: the SQLite query of a page (its first column the cursor, `?1`
/// the cursor to start after, `?2` the page size), the types of its other columns,
/// and the PostgreSQL statement that moves a page into place (`SELECT`ed from the
/// staging table between `head` and `tail`).
struct Copy {
    name: &'static str,
    source_table: &'static str,
    select: &'static str,
    head: &'static str,
    columns: &'static [Kind],
    tail: &'static str,
    /// Resume after the highest id the PostgreSQL table already holds.
    resume_from: Option<&'static str>,
}

use Kind::{Bool, Bytes, Int, Real, Text};

const INBOX: &[Copy] = &[
    Copy {
        name: "inbox",
        source_table: "inbox",
        select: "SELECT id, id, route, event_type, delivery_id, state, attempts, received_at_ms, updated_at_ms,
                        profile, headers, payload, typeof(payload) = 'blob', prompt, deliver, deliver_extra, skills,
                        toolsets, last_error, answer, next_attempt_at_ms, lease_until_ms, failures, failing_since_ms,
                        delivery_attempts
                 FROM inbox WHERE id > ?1 ORDER BY id LIMIT ?2",
        head: "INSERT INTO inbox (id, route, event_type, delivery_id, state, attempts, received_at_ms, updated_at_ms,
                   profile, headers, payload, payload_packed, prompt, deliver, deliver_extra, skills, toolsets,
                   last_error, answer, next_attempt_at_ms, lease_until_ms, failures, failing_since_ms,
                   delivery_attempts)",
        columns: &[
            Int, Text, Text, Text, Text, Int, Int, Int, Text, Text, Bytes, Bool, Text, Text, Text, Text,
            Text, Text, Text, Int, Int, Int, Int, Int,
        ],
        tail: "ON CONFLICT DO NOTHING",
        resume_from: Some("inbox"),
    },
    Copy {
        name: "inbox attempts",
        source_table: "inbox_attempts",
        select: "SELECT id, id, inbox_id, stage, started_at_ms, finished_at_ms, outcome, error
                 FROM inbox_attempts WHERE id > ?1 ORDER BY id LIMIT ?2",
        head: "INSERT INTO inbox_attempts (id, inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)",
        columns: &[Int, Int, Text, Int, Int, Text, Text],
        tail: "ON CONFLICT DO NOTHING",
        resume_from: Some("inbox_attempts"),
    },
    Copy {
        name: "deliveries",
        source_table: "deliveries",
        select: "SELECT id, id, kind, route, delivery_id, target, status, attempts, latency_ms, error, message,
                        created_at_ms
                 FROM deliveries WHERE id > ?1 ORDER BY id LIMIT ?2",
        head: "INSERT INTO deliveries (id, kind, route, delivery_id, target, status, attempts, latency_ms, error,
                   message, created_at_ms)",
        columns: &[Int, Text, Text, Text, Text, Text, Int, Int, Text, Text, Int],
        tail: "ON CONFLICT DO NOTHING",
        resume_from: Some("deliveries"),
    },
    Copy {
        name: "dedup keys",
        source_table: "dedup",
        select: "SELECT rowid, route, delivery_id, seen_at_ms FROM
                   (SELECT row_number() OVER (ORDER BY route, delivery_id) AS rowid, * FROM dedup)
                 WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        head: "INSERT INTO dedup (route, delivery_id, seen_at_ms)",
        columns: &[Text, Text, Int],
        tail: "ON CONFLICT (route, delivery_id) DO UPDATE SET seen_at_ms = GREATEST(dedup.seen_at_ms, excluded.seen_at_ms)",
        resume_from: None,
    },
];

const SESSIONS: &[Copy] = &[
    Copy {
        name: "sessions",
        source_table: "sessions",
        select: "SELECT rowid, id, source, user_id, session_key, chat_id, display_name, model, model_config,
                        system_prompt, started_at, ended_at, end_reason, message_count, tool_call_count,
                        input_tokens, output_tokens, cwd, title, api_call_count, profile_name, rewind_count, archived
                 FROM sessions WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        head: "INSERT INTO sessions (id, source, user_id, session_key, chat_id, display_name, model, model_config,
                   system_prompt, started_at, ended_at, end_reason, message_count, tool_call_count, input_tokens,
                   output_tokens, cwd, title, api_call_count, profile_name, rewind_count, archived)",
        columns: &[
            Text, Text, Text, Text, Text, Text, Text, Text, Text, Real, Real, Text, Int, Int, Int, Int,
            Text, Text, Int, Text, Int, Int,
        ],
        tail: "ON CONFLICT DO NOTHING",
        resume_from: None,
    },
    // Parents once every session is there (a parent missing from the source stays
    // unset rather than failing the copy).
    Copy {
        name: "session parents",
        source_table: "sessions",
        select: "SELECT rowid, id, parent_session_id FROM sessions
                 WHERE rowid > ?1 AND parent_session_id IS NOT NULL ORDER BY rowid LIMIT ?2",
        head: "UPDATE sessions SET parent_session_id = v.parent FROM (",
        columns: &[Text, Text],
        tail: ") AS v(id, parent) WHERE sessions.id = v.id AND sessions.parent_session_id IS NULL
               AND EXISTS (SELECT 1 FROM sessions p WHERE p.id = v.parent)",
        resume_from: None,
    },
    Copy {
        name: "messages",
        source_table: "messages",
        select: "SELECT id, id, session_id, seq, role, content, tool_call_id, tool_calls, tool_name, timestamp,
                        token_count, finish_reason, reasoning, active, compacted, api_content
                 FROM (SELECT m.*, row_number() OVER (PARTITION BY session_id ORDER BY id) AS seq FROM messages m
                       WHERE session_id IN (SELECT id FROM sessions))
                 WHERE id > ?1 ORDER BY id LIMIT ?2",
        head: "INSERT INTO messages (id, session_id, seq, role, content, tool_call_id, tool_calls, tool_name,
                   timestamp, token_count, finish_reason, reasoning, active, compacted, api_content)",
        columns: &[Int, Text, Int, Text, Text, Text, Text, Text, Real, Int, Text, Text, Int, Int, Text],
        tail: "ON CONFLICT DO NOTHING",
        resume_from: Some("messages"),
    },
    Copy {
        name: "runs",
        source_table: "herald_runs",
        select: "SELECT rowid, id, session_id, status, model, created_at, updated_at, last_event, output, error,
                        pending_steer, input_tokens, output_tokens, owner
                 FROM herald_runs WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        head: "INSERT INTO herald_runs (id, session_id, status, model, created_at, updated_at, last_event, output,
                   error, pending_steer, input_tokens, output_tokens, owner)",
        columns: &[Text, Text, Text, Text, Real, Real, Text, Text, Text, Text, Int, Int, Text],
        tail: "ON CONFLICT DO NOTHING",
        resume_from: None,
    },
    Copy {
        name: "stored responses",
        source_table: "herald_responses",
        select: "SELECT rowid, id, conversation, session_id, instructions, history, response, created_at, used_at
                 FROM herald_responses WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        head: "INSERT INTO herald_responses (id, conversation, session_id, instructions, history, response,
                   created_at, used_at)",
        columns: &[Text, Text, Text, Text, Text, Text, Real, Real],
        tail: "ON CONFLICT DO NOTHING",
        resume_from: None,
    },
];

/// How far one table got: its name, rows copied (or skipped as already there) and
/// the rows the source has.
pub struct Progress<'a> {
    pub table: &'a str,
    pub done: u64,
    pub total: u64,
}

/// Copies the SQLite inbox `source` (`herald.db`, opened with
/// [`herald_store::export::Source::Inbox`]) into the shared inbox tables; `progress`
/// hears after every page.
pub async fn import_inbox(
    settings: &PostgresSettings,
    source: &Export,
    progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<(), ScaleError> {
    let target = connect::Target::of(settings)?;
    let mut client = target.connect_one().await?;
    crate::migrate::migrate(&mut client, &crate::migrate::INBOX).await?;
    for copy in INBOX {
        copy_table(&mut client, source, copy, progress).await?;
    }
    // The SQLite inbox keeps an accepted event's key in its row: the keys still in
    // the window become rows of `dedup`.
    let since = herald_store::now_ms() - herald_store::DEDUP_WINDOW_MS;
    client
        .execute(
            "INSERT INTO dedup (route, delivery_id, seen_at_ms)
             SELECT route, delivery_id, MAX(received_at_ms) FROM inbox WHERE received_at_ms > $1
             GROUP BY route, delivery_id
             ON CONFLICT (route, delivery_id) DO UPDATE SET seen_at_ms = GREATEST(dedup.seen_at_ms, excluded.seen_at_ms)",
            &[&since],
        )
        .await
        .map_err(db)?;
    set_sequences(&client, &["inbox", "inbox_attempts", "deliveries"]).await
}

/// Copies the SQLite session store `source` (`state.db`, opened with
/// [`herald_store::export::Source::Sessions`]) into `profile`'s schema (`None`: the
/// default profile's).
pub async fn import_sessions(
    settings: &PostgresSettings,
    source: &Export,
    profile: Option<&str>,
    progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<(), ScaleError> {
    // Opening migrates the schema.
    drop(crate::open_sessions(settings, profile, "herald-store-migrate").await?);
    let schema = crate::schema_of(profile)?;
    let target = connect::Target::of(settings)?.in_schema(&schema);
    let mut client = target.connect_one().await?;
    for copy in SESSIONS {
        copy_table(&mut client, source, copy, progress).await?;
    }
    set_sequences(&client, &["messages"]).await
}

async fn copy_table(
    client: &mut Client,
    source: &Export,
    copy: &Copy,
    progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<(), ScaleError> {
    if !source.has(copy.source_table).map_err(store)? {
        return Ok(());
    }
    let total = u64::try_from(source.count(copy.source_table).map_err(store)?).unwrap_or(0);
    let mut after = match copy.resume_from {
        Some(table) => client
            .query_one(
                &format!("SELECT COALESCE(MAX(id), 0)::BIGINT FROM {table}"),
                &[],
            )
            .await
            .and_then(|r| r.try_get::<_, i64>(0))
            .map_err(db)?,
        None => 0,
    };
    let mut done = match copy.resume_from {
        Some(table) => client
            .query_one(&format!("SELECT COUNT(*)::BIGINT FROM {table}"), &[])
            .await
            .and_then(|r| r.try_get::<_, i64>(0))
            .map_err(db)
            .map(|n| u64::try_from(n).unwrap_or(0))?,
        None => 0,
    };
    staging::prepare(client, copy.columns).await.map_err(db)?;
    let mover = staging::mover(copy.head, copy.columns, copy.tail);
    let mut pages = 0;
    loop {
        let page = source
            .page(copy.select, after, PAGE, PAGE_BYTES)
            .map_err(store)?;
        let Some((last, _)) = page.last() else {
            if pages == 0 {
                // Nothing left to copy: say so once.
                progress(Progress {
                    table: copy.name,
                    done: done.max(total),
                    total: total.max(done),
                });
            }
            break;
        };
        pages += 1;
        after = *last;
        let rows = page.len() as u64;
        staging::write(client, copy.columns, &mover, page)
            .await
            .map_err(db)?;
        done += rows;
        progress(Progress {
            table: copy.name,
            done: done.min(total.max(done)),
            total: total.max(done),
        });
    }
    Ok(())
}

/// Each table's id sequence past the highest id copied, so new rows never reuse one.
async fn set_sequences(client: &Client, tables: &[&str]) -> Result<(), ScaleError> {
    for table in tables {
        client
            .execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'), GREATEST((SELECT MAX(id) FROM {table}), 1))"
                ),
                &[],
            )
            .await
            .map_err(db)?;
    }
    Ok(())
}

fn db(e: tokio_postgres::Error) -> ScaleError {
    ScaleError::Database(crate::connect_reason(&e))
}

fn store(e: herald_store::StoreError) -> ScaleError {
    ScaleError::Database(e.to_string())
}

//! The inbox: accepted agent-route events waiting to be processed.

use rusqlite::{Connection, OptionalExtension, Row, params_from_iter};
use serde::Serialize;

/// An accepted event to store; JSON fields are already serialised.
#[derive(Debug, Clone, PartialEq)]
pub struct NewInboxItem {
    pub route: String,
    pub event_type: String,
    pub delivery_id: String,
    pub received_at_ms: i64,
    pub profile: Option<String>,
    /// JSON object of the headers that matter (never signature secrets).
    pub headers: String,
    /// The payload as JSON (after the route script).
    pub payload: String,
    pub prompt: String,
    pub deliver: String,
    /// JSON object of the rendered `deliver_extra`.
    pub deliver_extra: String,
    /// JSON array.
    pub skills: String,
    /// JSON array, or `None` for the platform default.
    pub toolsets: Option<String>,
}

/// What the store did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueOutcome {
    /// Committed; this is its inbox id.
    Accepted { id: i64 },
    /// The route saw this delivery id within the dedup window; nothing was written.
    Duplicate,
}

/// A stored inbox entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxItem {
    pub id: i64,
    pub route: String,
    pub event_type: String,
    pub delivery_id: String,
    pub state: String,
    pub attempts: i64,
    pub received_at_ms: i64,
    pub updated_at_ms: i64,
    pub profile: Option<String>,
    pub headers: serde_json::Value,
    pub payload: serde_json::Value,
    pub prompt: String,
    pub deliver: String,
    pub deliver_extra: serde_json::Value,
    pub skills: serde_json::Value,
    pub toolsets: Option<serde_json::Value>,
    pub last_error: Option<String>,
}

/// Which entries to list.
#[derive(Debug, Clone, Default)]
pub struct InboxQuery {
    pub state: Option<String>,
    pub route: Option<String>,
    pub limit: Option<u32>,
}

const COLUMNS: &str = "id, route, event_type, delivery_id, state, attempts, received_at_ms, updated_at_ms, \
                       profile, headers, payload, prompt, deliver, deliver_extra, skills, toolsets, last_error";

fn json(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<InboxItem> {
    Ok(InboxItem {
        id: row.get(0)?,
        route: row.get(1)?,
        event_type: row.get(2)?,
        delivery_id: row.get(3)?,
        state: row.get(4)?,
        attempts: row.get(5)?,
        received_at_ms: row.get(6)?,
        updated_at_ms: row.get(7)?,
        profile: row.get(8)?,
        headers: json(row.get(9)?),
        payload: json(row.get(10)?),
        prompt: row.get(11)?,
        deliver: row.get(12)?,
        deliver_extra: json(row.get(13)?),
        skills: json(row.get(14)?),
        toolsets: row.get::<_, Option<String>>(15)?.map(json),
        last_error: row.get(16)?,
    })
}

/// Lists entries, newest first.
pub fn list(conn: &Connection, query: &InboxQuery) -> rusqlite::Result<Vec<InboxItem>> {
    let mut sql = format!("SELECT {COLUMNS} FROM inbox WHERE 1=1");
    let mut args: Vec<String> = Vec::new();
    if let Some(state) = &query.state {
        args.push(state.clone());
        sql.push_str(&format!(" AND state = ?{}", args.len()));
    }
    if let Some(route) = &query.route {
        args.push(route.clone());
        sql.push_str(&format!(" AND route = ?{}", args.len()));
    }
    sql.push_str(" ORDER BY id DESC");
    if let Some(limit) = query.limit {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args.iter()), from_row)?;
    rows.collect()
}

/// One entry by id.
pub fn get(conn: &Connection, id: i64) -> rusqlite::Result<Option<InboxItem>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM inbox WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

/// Counts per state.
pub fn counts(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut stmt =
        conn.prepare("SELECT state, COUNT(*) FROM inbox GROUP BY state ORDER BY state")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

//! The inbox: accepted agent-route events waiting to be processed.

use herald_protocol::json_depth::nesting_depth;
use herald_protocol::json_literal;
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
    pub payload: StoredPayload,
    pub prompt: String,
    pub deliver: String,
    pub deliver_extra: serde_json::Value,
    pub skills: serde_json::Value,
    pub toolsets: Option<serde_json::Value>,
    pub last_error: Option<String>,
    /// The agent's final answer, once a run produced it (delivered from here, never
    /// recomputed).
    pub answer: Option<String>,
    /// Earliest time of the next attempt (retry back-off).
    pub next_attempt_at_ms: i64,
    /// Failures in a row of the current stage (run or delivery).
    pub failures: i64,
    /// When the current stage began failing (the start of its retry window).
    pub failing_since_ms: Option<i64>,
    pub delivery_attempts: i64,
}

/// Which entries to list.
#[derive(Debug, Clone, Default)]
pub struct InboxQuery {
    pub state: Option<String>,
    pub route: Option<String>,
    /// Only entries received at or after this time.
    pub since_ms: Option<i64>,
    pub limit: Option<u32>,
}

pub(crate) const COLUMNS: &str = "id, route, event_type, delivery_id, state, attempts, received_at_ms, updated_at_ms, \
                       profile, headers, payload, prompt, deliver, deliver_extra, skills, toolsets, last_error, \
                       answer, next_attempt_at_ms, failures, failing_since_ms, delivery_attempts";

/// An entry's payload as stored, kept as its text: the worker never reads it (the
/// prompt was rendered at ingress), and a tree of a big nested body costs a hundred
/// times its size. Serialised as the JSON it is (as a string when it is not JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPayload {
    text: String,
    is_json: bool,
}

impl StoredPayload {
    /// A payload as stored (JSON or not, as a JSON reader takes it).
    pub fn new(text: String) -> StoredPayload {
        // Checked without building anything; as deep as a JSON reader takes by default
        // (serde_json's recursion limit), or it is shown as a string, as a tree was.
        let is_json = nesting_depth(text.as_bytes()) <= MAX_NESTING
            && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
        StoredPayload { text, is_json }
    }

    #[cfg(test)]
    pub(crate) fn for_test(text: String) -> StoredPayload {
        StoredPayload::new(text)
    }

    /// The text as stored.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The payload for a person to read: indented JSON; the text as stored when it holds
    /// numbers a tree would show otherwise (see herald-protocol's `json_literal`); a JSON
    /// string when it is not JSON.
    pub fn display_text(&self) -> String {
        if self.is_json && json_literal::has_exotic(self.text.as_bytes()) {
            return self.text.clone();
        }
        serde_json::to_string_pretty(&self.value()).unwrap_or_default()
    }

    /// The payload as a JSON value (built now; a string when it is not JSON). Numbers a
    /// tree cannot hold as Python reads them are stand-ins (see herald-protocol's
    /// `json_literal`); the text keeps them.
    pub fn value(&self) -> serde_json::Value {
        if self.is_json {
            let tree = json_literal::tree_text(self.text.as_bytes());
            if let Ok(value) = serde_json::from_slice(&tree) {
                return value;
            }
        }
        json(self.text.clone())
    }
}

/// The deepest nesting of arrays and objects serde_json parses by default.
const MAX_NESTING: usize = 127;

impl Serialize for StoredPayload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = self
            .is_json
            .then(|| serde_json::value::RawValue::from_string(self.text.clone()).ok())
            .flatten();
        match raw {
            Some(raw) => raw.serialize(serializer),
            None => serializer.serialize_str(&self.text),
        }
    }
}

/// A stored JSON column's value (text that is not JSON stays a string).
pub fn json(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

pub(crate) fn from_row(row: &Row<'_>) -> rusqlite::Result<InboxItem> {
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
        payload: StoredPayload::new(crate::payload::decode(row.get_ref(10)?)),
        prompt: row.get(11)?,
        deliver: row.get(12)?,
        deliver_extra: json(row.get(13)?),
        skills: json(row.get(14)?),
        toolsets: row.get::<_, Option<String>>(15)?.map(json),
        last_error: row.get(16)?,
        answer: row.get(17)?,
        next_attempt_at_ms: row.get(18)?,
        failures: row.get(19)?,
        failing_since_ms: row.get(20)?,
        delivery_attempts: row.get(21)?,
    })
}

/// Lists entries, newest first.
pub(crate) fn list(conn: &Connection, query: &InboxQuery) -> rusqlite::Result<Vec<InboxItem>> {
    let mut sql = format!("SELECT {COLUMNS} FROM inbox WHERE 1=1");
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    if let Some(state) = &query.state {
        args.push(state.clone().into());
        sql.push_str(&format!(" AND state = ?{}", args.len()));
    }
    if let Some(route) = &query.route {
        args.push(route.clone().into());
        sql.push_str(&format!(" AND route = ?{}", args.len()));
    }
    if let Some(since) = query.since_ms {
        args.push(since.into());
        sql.push_str(&format!(" AND received_at_ms >= ?{}", args.len()));
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
pub(crate) fn get(conn: &Connection, id: i64) -> rusqlite::Result<Option<InboxItem>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM inbox WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

/// Every state an inbox entry can be in, in the order an entry passes them.
pub const STATES: [&str; 6] = [
    "queued",
    "running",
    "delivering",
    "delivered",
    "dead",
    "cancelled",
];

/// Counts per state with every state of [`STATES`] present (0 when empty), in that
/// order; a state outside it (from a newer herald sharing the store) comes after.
pub fn every_state(counts: Vec<(String, i64)>) -> Vec<(String, i64)> {
    let mut all: Vec<(String, i64)> = STATES.iter().map(|s| ((*s).to_owned(), 0)).collect();
    for (state, n) in counts {
        match all.iter_mut().find(|(s, _)| *s == state) {
            Some(slot) => slot.1 = n,
            None => all.push((state, n)),
        }
    }
    all
}

/// Counts per state.
pub(crate) fn counts(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut stmt =
        conn.prepare("SELECT state, COUNT(*) FROM inbox GROUP BY state ORDER BY state")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// What the metrics show of the inbox besides its counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxGauges {
    /// When the oldest queued entry was received (none queued: `None`).
    pub oldest_queued_at_ms: Option<i64>,
    /// Entries claimed under a lease that runs past `now`.
    pub leases_held: i64,
}

pub(crate) fn gauges(conn: &Connection, now_ms: i64) -> rusqlite::Result<InboxGauges> {
    let oldest_queued_at_ms = conn
        .query_row(
            "SELECT received_at_ms FROM inbox WHERE state = 'queued' ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    let leases_held = conn.query_row(
        "SELECT COUNT(*) FROM inbox WHERE state IN ('running', 'delivering') AND lease_until_ms > ?1",
        [now_ms],
        |r| r.get(0),
    )?;
    Ok(InboxGauges {
        oldest_queued_at_ms,
        leases_held,
    })
}

/// One attempt at an entry: an agent run or a delivery, with its outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub stage: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    /// `ok`, `retry`, `dead`, `interrupted` or `replayed`.
    pub outcome: String,
    pub error: Option<String>,
}

/// Every attempt at an entry, oldest first.
pub(crate) fn attempts(conn: &Connection, inbox_id: i64) -> rusqlite::Result<Vec<Attempt>> {
    let mut stmt = conn.prepare(
        "SELECT stage, started_at_ms, finished_at_ms, outcome, error FROM inbox_attempts
         WHERE inbox_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([inbox_id], |r| {
        Ok(Attempt {
            stage: r.get(0)?,
            started_at_ms: r.get(1)?,
            finished_at_ms: r.get(2)?,
            outcome: r.get(3)?,
            error: r.get(4)?,
        })
    })?;
    rows.collect()
}

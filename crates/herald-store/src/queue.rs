//! The inbox as a work queue (architecture: "The inbox and the workers").
//!
//! States: `queued` (waiting for an agent run), `running` (claimed by a worker under a
//! lease), `delivering` (the answer is stored and waits for its next delivery attempt),
//! `delivered`, and `dead` (a permanent failure, or retries ran out). Every attempt —
//! run or delivery — is kept in `inbox_attempts` with its outcome and error.

use crate::deliveries::{self, NewDelivery};
use crate::inbox::{COLUMNS, InboxItem, from_row};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;

/// Which part of the work an attempt was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Run,
    Delivery,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Run => "run",
            Stage::Delivery => "delivery",
        }
    }
    /// The stage an entry is at: delivery once it has an answer.
    pub fn of(item: &InboxItem) -> Stage {
        if item.answer.is_some() {
            Stage::Delivery
        } else {
            Stage::Run
        }
    }
}

/// What to claim.
#[derive(Debug, Clone, Default)]
pub struct ClaimRequest {
    pub now_ms: i64,
    pub lease_ms: i64,
    /// Most entries to claim.
    pub max: usize,
    /// Entries each route already has running in this process.
    pub running_per_route: HashMap<String, usize>,
    /// Most entries of one route running at once.
    pub per_route_limit: usize,
    /// Which routes' entries: the webhook routes', or the chat platforms'.
    pub scope: ClaimScope,
}

/// Which entries a claim takes: a chat platform's messages (routes named
/// `chat:<platform>:<bot>`) are answered by that platform's door, never by the webhook
/// workers or another platform's door.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClaimScope {
    #[default]
    Webhooks,
    /// One platform's entries (`telegram`, `slack`).
    Chat(&'static str),
}

/// The prefix of a chat platform's inbox routes.
pub const CHAT_ROUTE_PREFIX: &str = "chat:";

impl ClaimScope {
    /// The route prefix of the scope's entries, for SQL (`None`: the webhook routes,
    /// every route not under `chat:`).
    pub fn chat_prefix(self) -> Option<String> {
        match self {
            ClaimScope::Webhooks => None,
            ClaimScope::Chat(platform) => Some(format!("{CHAT_ROUTE_PREFIX}{platform}:")),
        }
    }
}

/// The state an entry waits in, given whether it has an answer.
const WAITING_STATE_SQL: &str = "CASE WHEN answer IS NULL THEN 'queued' ELSE 'delivering' END";

/// Claims up to `max` ready entries (oldest first) whose route has room, plus
/// entries whose lease ran out, marking them `running` until `now + lease`.
pub(crate) fn claim(conn: &Connection, req: &ClaimRequest) -> rusqlite::Result<Vec<InboxItem>> {
    if req.max == 0 {
        return Ok(Vec::new());
    }
    let look = (req.max * 8).max(64) as i64;
    let mut candidates: Vec<(i64, String)> = Vec::new();
    for sql in [
        "SELECT id, route FROM inbox WHERE state = 'queued' AND next_attempt_at_ms <= ?1 AND ((?3 IS NULL AND substr(route, 1, 5) <> 'chat:') OR substr(route, 1, length(?3)) = ?3) ORDER BY id LIMIT ?2",
        "SELECT id, route FROM inbox WHERE state = 'delivering' AND next_attempt_at_ms <= ?1 AND ((?3 IS NULL AND substr(route, 1, 5) <> 'chat:') OR substr(route, 1, length(?3)) = ?3) ORDER BY id LIMIT ?2",
        "SELECT id, route FROM inbox WHERE state = 'running' AND lease_until_ms < ?1 AND ((?3 IS NULL AND substr(route, 1, 5) <> 'chat:') OR substr(route, 1, length(?3)) = ?3) ORDER BY id LIMIT ?2",
    ] {
        let mut stmt = conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params![req.now_ms, look, req.scope.chat_prefix()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        for row in rows {
            candidates.push(row?);
        }
    }
    candidates.sort_by_key(|(id, _)| *id);
    let mut running = req.running_per_route.clone();
    let mut claimed = Vec::new();
    for (id, route) in candidates {
        if claimed.len() >= req.max {
            break;
        }
        let n = running.entry(route).or_insert(0);
        if *n >= req.per_route_limit.max(1) {
            continue;
        }
        *n += 1;
        conn.prepare_cached(
            "UPDATE inbox SET state = 'running', lease_until_ms = ?2, updated_at_ms = ?3,
                 attempts = attempts + (answer IS NULL),
                 delivery_attempts = delivery_attempts + (answer IS NOT NULL)
             WHERE id = ?1",
        )?
        .execute(params![id, req.now_ms + req.lease_ms, req.now_ms])?;
        if let Some(item) = conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM inbox WHERE id = ?1"))?
            .query_row([id], from_row)
            .optional()?
        {
            claimed.push(item);
        }
    }
    Ok(claimed)
}

fn attempt(
    conn: &Connection,
    id: i64,
    stage: Stage,
    started_ms: i64,
    now_ms: i64,
    outcome: &str,
    error: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO inbox_attempts (inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![id, stage.as_str(), started_ms, now_ms, outcome, error])?;
    Ok(())
}

/// Stores a run's answer; the entry stays claimed for its delivery.
pub(crate) fn store_answer(
    conn: &Connection,
    id: i64,
    answer: &str,
    started_ms: i64,
    now_ms: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE inbox SET answer = ?2, failures = 0, failing_since_ms = NULL, last_error = NULL,
             updated_at_ms = ?3 WHERE id = ?1",
    )?
    .execute(params![id, answer, now_ms])?;
    attempt(conn, id, Stage::Run, started_ms, now_ms, "ok", None)
}

/// A transient failure: the entry waits until `next_ms`.
pub(crate) fn retry_later(
    conn: &Connection,
    id: i64,
    stage: Stage,
    started_ms: i64,
    now_ms: i64,
    next_ms: i64,
    error: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(&format!(
        "UPDATE inbox SET state = {WAITING_STATE_SQL}, lease_until_ms = NULL, next_attempt_at_ms = ?2,
             failures = failures + 1, failing_since_ms = COALESCE(failing_since_ms, ?3),
             last_error = ?4, updated_at_ms = ?5 WHERE id = ?1"
    ))?
    .execute(params![id, next_ms, started_ms, error, now_ms])?;
    attempt(conn, id, stage, started_ms, now_ms, "retry", Some(error))
}

/// A permanent failure (or retries ran out): `dead` with the reason.
pub(crate) fn mark_dead(
    conn: &Connection,
    id: i64,
    stage: Stage,
    started_ms: i64,
    now_ms: i64,
    error: &str,
    delivery: Option<&NewDelivery>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE inbox SET state = 'dead', lease_until_ms = NULL, last_error = ?2,
             failures = failures + 1, updated_at_ms = ?3 WHERE id = ?1",
    )?
    .execute(params![id, error, now_ms])?;
    if let Some(d) = delivery {
        deliveries::insert(conn, d)?;
    }
    attempt(conn, id, stage, started_ms, now_ms, "dead", Some(error))
}

/// The target accepted the answer.
pub(crate) fn mark_delivered(
    conn: &Connection,
    id: i64,
    started_ms: i64,
    now_ms: i64,
    delivery: &NewDelivery,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE inbox SET state = 'delivered', lease_until_ms = NULL, last_error = NULL,
             failures = 0, failing_since_ms = NULL, updated_at_ms = ?2 WHERE id = ?1",
    )?
    .execute(params![id, now_ms])?;
    deliveries::insert(conn, delivery)?;
    attempt(conn, id, Stage::Delivery, started_ms, now_ms, "ok", None)
}

/// Gives a claimed entry back (shutdown): it waits again, unchanged.
pub(crate) fn release(
    conn: &Connection,
    id: i64,
    stage: Stage,
    started_ms: i64,
    now_ms: i64,
    why: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(&format!(
        "UPDATE inbox SET state = {WAITING_STATE_SQL}, lease_until_ms = NULL, updated_at_ms = ?2
         WHERE id = ?1 AND state = 'running'"
    ))?
    .execute(params![id, now_ms])?;
    attempt(
        conn,
        id,
        stage,
        started_ms,
        now_ms,
        "interrupted",
        Some(why),
    )
}

/// At start: entries left `running` by a crash wait again (their interrupted attempt
/// is recorded). Returns how many.
pub(crate) fn recover(conn: &Connection, now_ms: i64) -> rusqlite::Result<usize> {
    conn.execute(
        "INSERT INTO inbox_attempts (inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)
         SELECT id, CASE WHEN answer IS NULL THEN 'run' ELSE 'delivery' END, updated_at_ms, ?1,
                'interrupted', 'herald stopped during this attempt'
         FROM inbox WHERE state = 'running'",
        [now_ms],
    )?;
    conn.execute(
        &format!(
            "UPDATE inbox SET state = {WAITING_STATE_SQL}, lease_until_ms = NULL, updated_at_ms = ?1
             WHERE state = 'running'"
        ),
        [now_ms],
    )
}

/// Extends the leases of entries this process is working on.
pub(crate) fn renew(conn: &Connection, ids: &[i64], until_ms: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE inbox SET lease_until_ms = ?2 WHERE id = ?1 AND state = 'running'",
    )?;
    for id in ids {
        stmt.execute(params![id, until_ms])?;
    }
    Ok(())
}

/// What `replay` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayOutcome {
    /// Queued again in this state (`queued` for a new run, `delivering` to re-send
    /// a stored answer that was never delivered).
    Queued(String),
    NotFound,
    /// Only `dead`, `delivered` and `cancelled` entries can be replayed.
    NotFinished(String),
}

/// What a cancel did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The entry was queued and is now `cancelled`: it will not run.
    Cancelled,
    NotFound,
    /// Only a `queued` entry can be cancelled (one running or delivering is past it).
    NotQueued(String),
}

/// Cancels a queued entry: it is `cancelled`, never run, and can be replayed.
pub(crate) fn cancel(conn: &Connection, id: i64, now_ms: i64) -> rusqlite::Result<CancelOutcome> {
    let Some(state): Option<String> = conn
        .query_row("SELECT state FROM inbox WHERE id = ?1", [id], |r| r.get(0))
        .optional()?
    else {
        return Ok(CancelOutcome::NotFound);
    };
    if state != "queued" {
        return Ok(CancelOutcome::NotQueued(state));
    }
    conn.execute(
        "UPDATE inbox SET state = 'cancelled', lease_until_ms = NULL, next_attempt_at_ms = 0,
             updated_at_ms = ?2 WHERE id = ?1",
        params![id, now_ms],
    )?;
    attempt(conn, id, Stage::Run, now_ms, now_ms, "cancelled", None)?;
    Ok(CancelOutcome::Cancelled)
}

/// Queues a finished entry again: a dead delivery re-sends its stored answer; anything
/// else runs the agent again.
pub(crate) fn replay(conn: &Connection, id: i64, now_ms: i64) -> rusqlite::Result<ReplayOutcome> {
    let Some((state, has_answer)): Option<(String, bool)> = conn
        .query_row(
            "SELECT state, answer IS NOT NULL FROM inbox WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?
    else {
        return Ok(ReplayOutcome::NotFound);
    };
    if !matches!(state.as_str(), "dead" | "delivered" | "cancelled") {
        return Ok(ReplayOutcome::NotFinished(state));
    }
    let resend = state == "dead" && has_answer;
    let new_state = if resend { "delivering" } else { "queued" };
    conn.execute(
        "UPDATE inbox SET state = ?2, answer = CASE WHEN ?3 THEN answer ELSE NULL END,
             next_attempt_at_ms = 0, failures = 0, failing_since_ms = NULL, lease_until_ms = NULL,
             updated_at_ms = ?4 WHERE id = ?1",
        params![id, new_state, resend, now_ms],
    )?;
    let stage = if resend { Stage::Delivery } else { Stage::Run };
    attempt(conn, id, stage, now_ms, now_ms, "replayed", None)?;
    Ok(ReplayOutcome::Queued(new_state.to_owned()))
}

/// Deletes at most `limit` entries in `state` last changed before `before_ms`, oldest
/// first, with their attempts; how many.
pub(crate) fn purge(
    conn: &Connection,
    state: &str,
    before_ms: i64,
    now_ms: i64,
    limit: usize,
) -> rusqlite::Result<usize> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // The same rows in each statement: nothing else writes between them. An entry
    // changed before the cut was received before it: the scan reads only the old end
    // of the received-time index, however many recent entries there are.
    let chosen = "SELECT id FROM inbox INDEXED BY inbox_received
                  WHERE received_at_ms < ?2 AND state = ?1 AND updated_at_ms < ?2
                  ORDER BY received_at_ms LIMIT ?3";
    // An inbox row is its event's dedup key (see `dedup_keys`): keys still within the
    // window move to `dedup`, so that a purge does not let a redelivery in again
    // after a restart.
    conn.execute(
        &format!(
            "INSERT INTO dedup (route, delivery_id, seen_at_ms)
                 SELECT route, delivery_id, max(received_at_ms) FROM inbox
                 WHERE id IN ({chosen}) AND received_at_ms > ?4
                 GROUP BY route, delivery_id
             ON CONFLICT (route, delivery_id) DO UPDATE SET seen_at_ms = max(seen_at_ms, excluded.seen_at_ms)"
        ),
        params![state, before_ms, limit, now_ms - crate::DEDUP_WINDOW_MS],
    )?;
    conn.execute(
        &format!("DELETE FROM inbox_attempts WHERE inbox_id IN ({chosen})"),
        params![state, before_ms, limit],
    )?;
    conn.execute(
        &format!("DELETE FROM inbox_fts WHERE rowid IN ({chosen})"),
        params![state, before_ms, limit],
    )?;
    conn.execute(
        &format!("DELETE FROM inbox WHERE id IN ({chosen})"),
        params![state, before_ms, limit],
    )
}

//! Delivery records: every direct delivery (success or failure) with its target,
//! attempts, latency and error.

use rusqlite::{Connection, Row, params, params_from_iter};
use serde::Serialize;

/// Longest message text kept in a delivery record.
pub const MESSAGE_PREVIEW_CHARS: usize = 1000;

/// A delivery to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
    pub kind: String,
    pub route: String,
    pub delivery_id: String,
    pub target: String,
    /// `delivered` or `failed`.
    pub status: String,
    pub attempts: u32,
    pub latency_ms: u64,
    pub error: Option<String>,
    pub message: String,
    pub created_at_ms: i64,
}

/// A stored delivery.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    pub id: i64,
    pub kind: String,
    pub route: String,
    pub delivery_id: String,
    pub target: String,
    pub status: String,
    pub attempts: i64,
    pub latency_ms: i64,
    pub error: Option<String>,
    pub message: String,
    pub created_at_ms: i64,
}

/// Which deliveries to list.
#[derive(Debug, Clone, Default)]
pub struct DeliveryQuery {
    pub route: Option<String>,
    pub status: Option<String>,
    /// Only the deliveries of this event (with `route`).
    pub delivery_id: Option<String>,
    pub limit: Option<u32>,
}

pub(crate) fn insert(conn: &Connection, d: &NewDelivery) -> rusqlite::Result<i64> {
    let message: String = d.message.chars().take(MESSAGE_PREVIEW_CHARS).collect();
    conn.prepare_cached(
        "INSERT INTO deliveries (kind, route, delivery_id, target, status, attempts, latency_ms, error, message, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        d.kind, d.route, d.delivery_id, d.target, d.status, d.attempts, d.latency_ms as i64, d.error, message, d.created_at_ms
    ])?;
    Ok(conn.last_insert_rowid())
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<Delivery> {
    Ok(Delivery {
        id: r.get(0)?,
        kind: r.get(1)?,
        route: r.get(2)?,
        delivery_id: r.get(3)?,
        target: r.get(4)?,
        status: r.get(5)?,
        attempts: r.get(6)?,
        latency_ms: r.get(7)?,
        error: r.get(8)?,
        message: r.get(9)?,
        created_at_ms: r.get(10)?,
    })
}

/// Lists deliveries, newest first.
pub(crate) fn list(conn: &Connection, q: &DeliveryQuery) -> rusqlite::Result<Vec<Delivery>> {
    let mut sql = "SELECT id, kind, route, delivery_id, target, status, attempts, latency_ms, error, message, created_at_ms
                   FROM deliveries WHERE 1=1"
        .to_owned();
    let mut args = Vec::new();
    if let Some(r) = &q.route {
        args.push(r.clone());
        sql.push_str(&format!(" AND route = ?{}", args.len()));
    }
    if let Some(d) = &q.delivery_id {
        args.push(d.clone());
        sql.push_str(&format!(" AND delivery_id = ?{}", args.len()));
    }
    if let Some(s) = &q.status {
        args.push(s.clone());
        sql.push_str(&format!(" AND status = ?{}", args.len()));
    }
    sql.push_str(" ORDER BY id DESC");
    if let Some(limit) = q.limit {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args.iter()), from_row)?;
    rows.collect()
}

/// Deletes at most `limit` records made before `before_ms`, oldest first: `delivered`
/// ones, or the others; how many.
pub fn purge(
    conn: &Connection,
    delivered: bool,
    before_ms: i64,
    limit: usize,
) -> rusqlite::Result<usize> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let wanted = if delivered {
        "= 'delivered'"
    } else {
        "<> 'delivered'"
    };
    conn.execute(
        &format!(
            "DELETE FROM deliveries WHERE id IN
                 (SELECT id FROM deliveries INDEXED BY deliveries_created
                  WHERE created_at_ms < ?1 AND status {wanted}
                  ORDER BY created_at_ms LIMIT ?2)"
        ),
        params![before_ms, limit],
    )
}

//! The inbox as the dashboard pages through it: summaries without payloads (a payload
//! is opened only with its event), filtered by route, state, time and delivery id, and
//! searched over delivery ids, event types and rendered prompts.
//!
//! On SQLite the search is a full-text index (FTS5, trigram: any substring of three
//! characters or more) built beside the writer, off the accept path (see
//! `search_index`); entries not indexed yet are scanned.

use crate::search_index::INDEXED_PROMPT;
use rusqlite::{Connection, params_from_iter};
use serde::Serialize;

/// Which events to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    pub route: Option<String>,
    pub state: Option<String>,
    /// Received at or after.
    pub since_ms: Option<i64>,
    /// Received before.
    pub until_ms: Option<i64>,
    /// Exactly this delivery id.
    pub delivery_id: Option<String>,
    /// A substring of the delivery id, the event type or the rendered prompt.
    pub search: Option<String>,
    /// Only entries older than this id (the next page).
    pub before_id: Option<i64>,
    pub limit: u32,
}

/// One event of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventSummary {
    pub id: i64,
    pub route: String,
    pub event_type: String,
    pub delivery_id: String,
    pub state: String,
    pub attempts: i64,
    pub received_at_ms: i64,
    pub updated_at_ms: i64,
    /// The rendered prompt's first 200 characters (both backends cut it in SQL).
    pub prompt: String,
    pub last_error: Option<String>,
}

/// Most events of one page.
pub const MAX_PAGE: u32 = 500;
/// Entries past the index that a search scans at most.
const UNINDEXED_SCAN: i64 = 20_000;

const SUMMARY: &str = "inbox.id, inbox.route, inbox.event_type, inbox.delivery_id, inbox.state, \
                       inbox.attempts, inbox.received_at_ms, inbox.updated_at_ms, \
                       substr(inbox.prompt, 1, 200), inbox.last_error";

/// How a page's rows are chosen.
enum Source<'a> {
    /// Every entry, newest first.
    All,
    /// Entries scanned for `search` (a substring), within ids `(after, upto]`.
    Scanned {
        search: &'a str,
        after: i64,
        upto: i64,
    },
    /// Entries the index finds for `search`, at or below id `upto`.
    Indexed { search: &'a str, upto: i64 },
}

/// A page of events as `q` asks. A search reads the newest entries the index has not
/// seen yet by scanning them, then the index, newest first, each stopping at the page.
pub(crate) fn page(conn: &Connection, q: &EventQuery) -> rusqlite::Result<Vec<EventSummary>> {
    let limit = q.limit.clamp(1, MAX_PAGE) as usize;
    let Some(search) = q.search.as_deref().map(str::trim).filter(|s| !s.is_empty()) else {
        return rows(conn, q, Source::All, limit);
    };
    let newest: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM inbox", [], |r| r.get(0))?;
    // Under three characters there are no trigrams: only the newest entries, scanned.
    let trigrams = search.chars().count() >= 3;
    let indexed = if trigrams {
        crate::search_index::indexed_up_to(conn)?.min(newest)
    } else {
        0
    };
    let after = indexed.max(newest - UNINDEXED_SCAN);
    let mut page = rows(
        conn,
        q,
        Source::Scanned {
            search,
            after,
            upto: newest,
        },
        limit,
    )?;
    if trigrams && page.len() < limit {
        let more = rows(
            conn,
            q,
            Source::Indexed {
                search,
                upto: indexed,
            },
            limit - page.len(),
        )?;
        page.extend(more);
    }
    Ok(page)
}

fn rows(
    conn: &Connection,
    q: &EventQuery,
    source: Source<'_>,
    limit: usize,
) -> rusqlite::Result<Vec<EventSummary>> {
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    let arg = |v: rusqlite::types::Value, args: &mut Vec<rusqlite::types::Value>| {
        args.push(v);
        format!("?{}", args.len())
    };
    let mut sql = match source {
        Source::All => format!("SELECT {SUMMARY} FROM inbox WHERE 1=1"),
        Source::Scanned {
            search,
            after,
            upto,
        } => {
            let like = arg(like_pattern(search).into(), &mut args);
            let (after, upto) = (arg(after.into(), &mut args), arg(upto.into(), &mut args));
            format!(
                "SELECT {SUMMARY} FROM inbox WHERE id > {after} AND id <= {upto} AND {}",
                matches_like(&like)
            )
        }
        Source::Indexed { search, upto } => {
            let trigrams = crate::search_index::trigram_query(search).unwrap_or_default();
            let query = arg(trigrams.into(), &mut args);
            let like = arg(like_pattern(search).into(), &mut args);
            let upto = arg(upto.into(), &mut args);
            // Driven by the index in id order, so a page stops early; the index holds
            // trigrams without positions, so each entry it finds is checked.
            format!(
                "SELECT {SUMMARY} FROM inbox_fts JOIN inbox ON inbox.id = inbox_fts.rowid
                 WHERE inbox_fts MATCH {query} AND inbox_fts.rowid <= {upto}
                 AND {}",
                matches_like(&like)
            )
        }
    };
    let filters = [
        ("inbox.route = ", q.route.clone().map(Into::into)),
        ("inbox.state = ", q.state.clone().map(Into::into)),
        (
            "inbox.delivery_id = ",
            q.delivery_id.clone().map(Into::into),
        ),
        ("inbox.received_at_ms >= ", q.since_ms.map(Into::into)),
        ("inbox.received_at_ms < ", q.until_ms.map(Into::into)),
        ("inbox.id < ", q.before_id.map(Into::into)),
    ];
    for (clause, value) in filters {
        if let Some(v) = value {
            let at = arg(v, &mut args);
            sql.push_str(&format!(" AND {clause}{at}"));
        }
    }
    let order = match source {
        Source::Indexed { .. } => "inbox_fts.rowid",
        _ => "inbox.id",
    };
    sql.push_str(&format!(" ORDER BY {order} DESC LIMIT {limit}"));
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args.iter()), |r| {
        Ok(EventSummary {
            id: r.get(0)?,
            route: r.get(1)?,
            event_type: r.get(2)?,
            delivery_id: r.get(3)?,
            state: r.get(4)?,
            attempts: r.get(5)?,
            received_at_ms: r.get(6)?,
            updated_at_ms: r.get(7)?,
            prompt: r.get(8)?,
            last_error: r.get(9)?,
        })
    })?;
    rows.collect()
}

/// Whether an entry's delivery id, event type or prompt matches the LIKE pattern
/// bound at `like` (the prompt's indexed part, so that the index and a scan agree).
fn matches_like(like: &str) -> String {
    format!(
        "(inbox.delivery_id LIKE {like} ESCAPE '\\' OR inbox.event_type LIKE {like} ESCAPE '\\'
          OR substr(inbox.prompt, 1, {INDEXED_PROMPT}) LIKE {like} ESCAPE '\\')"
    )
}

/// `text` as a LIKE pattern matching it anywhere, `%`, `_` and `\` taken literally.
pub fn like_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_text_is_taken_literally() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }
}

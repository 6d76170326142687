//! The inbox as the dashboard pages through it: summaries without payloads (a payload
//! is opened only with its event), filtered by route, state, time and delivery id, and
//! searched over delivery ids, event types and rendered prompts.
//!
//! On SQLite the search is a full-text index (FTS5, trigram: any substring of three
//! characters or more) kept off the accept path: the dashboard has it catch up with new
//! entries a batch at a time ([`index_batch`]); entries not indexed yet are scanned.

use rusqlite::{Connection, OptionalExtension, params_from_iter};
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
/// Characters of a prompt the index reads.
const INDEXED_PROMPT: usize = 4000;
/// Entries past the index that a search scans at most.
const UNINDEXED_SCAN: i64 = 20_000;

const SUMMARY: &str = "inbox.id, inbox.route, inbox.event_type, inbox.delivery_id, inbox.state, \
                       inbox.attempts, inbox.received_at_ms, inbox.updated_at_ms, \
                       substr(inbox.prompt, 1, 200), inbox.last_error";

/// Indexes up to `max` entries the search index has not seen; how many.
pub(crate) fn index_batch(conn: &Connection, max: usize) -> rusqlite::Result<usize> {
    let last = indexed_up_to(conn)?;
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    let n = conn.execute(
        &format!(
            "INSERT INTO inbox_fts (rowid, delivery_id, event_type, prompt)
                 SELECT id, delivery_id, event_type, substr(prompt, 1, {INDEXED_PROMPT})
                 FROM inbox WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
        [last, max],
    )?;
    if n > 0 {
        conn.execute(
            "UPDATE inbox_fts_state SET last_id = (SELECT max(id) FROM
                 (SELECT id FROM inbox WHERE id > ?1 ORDER BY id LIMIT ?2))",
            [last, max],
        )?;
    }
    Ok(n)
}

/// Whether the inbox has entries the search index has not seen.
pub(crate) fn behind(conn: &Connection) -> rusqlite::Result<bool> {
    let newest: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM inbox", [], |r| r.get(0))?;
    Ok(newest > indexed_up_to(conn)?)
}

fn indexed_up_to(conn: &Connection) -> rusqlite::Result<i64> {
    Ok(conn
        .query_row("SELECT last_id FROM inbox_fts_state", [], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

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
        indexed_up_to(conn)?.min(newest)
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
                "SELECT {SUMMARY} FROM inbox WHERE id > {after} AND id <= {upto}
                 AND (delivery_id LIKE {like} ESCAPE '\\' OR event_type LIKE {like} ESCAPE '\\' OR prompt LIKE {like} ESCAPE '\\')"
            )
        }
        Source::Indexed { search, upto } => {
            let phrase = arg(fts_phrase(search).into(), &mut args);
            let upto = arg(upto.into(), &mut args);
            // Driven by the index in id order, so a page stops early.
            format!(
                "SELECT {SUMMARY} FROM inbox_fts JOIN inbox ON inbox.id = inbox_fts.rowid
                 WHERE inbox_fts MATCH {phrase} AND inbox_fts.rowid <= {upto}"
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

/// `text` as one FTS5 phrase (a trigram index matches it as a substring).
fn fts_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
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
        assert_eq!(fts_phrase("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
